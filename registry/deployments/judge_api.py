"""The judge endpoint: a `vllm bench serve` result or a saved /metrics, held to the certified band of its pair.

Anyone may ask (the bands are public figures); nothing of the file is kept.
"""

from __future__ import annotations

from typing import TypedDict

from django.core.files.uploadedfile import UploadedFile
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry.api.shapes import shape
from registry.deployments.judging import Answer, Question, Refusal, judge_upload
from registry.params import WholeNumberField


class JudgeFields(TypedDict):
    file: UploadedFile[bytes]
    draft: str
    verifier: str
    k: int | None
    temperature: float | None
    hardware: str


class JudgeIn(serializers.Serializer[JudgeFields]):
    file = serializers.FileField(help_text="The JSON `vllm bench serve --save-result` wrote, or a saved /metrics text.")
    draft = serializers.CharField(max_length=200, required=False, default="", allow_blank=True,
                                  help_text="The draft's Hub repo id (blank for ngram or suffix).")  # fmt: skip
    verifier = serializers.CharField(max_length=200)
    k = WholeNumberField(required=False, allow_null=True, default=None, min_value=1, max_value=64,
                         help_text="num_speculative_tokens; by default the positions the file counts.")  # fmt: skip
    temperature = serializers.FloatField(required=False, default=None, allow_null=True, min_value=0.0, max_value=2.0,
                                         help_text="The run's temperature: 0, or one the certified run measured. By "
                                         "default the file's (`--metadata temperature=0`), else 0, and the answer "
                                         "says it was assumed.")  # fmt: skip
    hardware = serializers.CharField(required=False, default="cpu", max_length=32)


class Judge(APIView):
    """POST a `vllm bench serve` result JSON (or a saved /metrics) with the pair it ran: where its AL and each
    position's rate stand against the certified band (within, below or above), and the smallest difference the
    comparison can see. A file without spec-decode fields is a 422 saying so."""

    permission_classes = [permissions.AllowAny]
    parser_classes = [MultiPartParser]
    # Anyone may send up to 16 MiB to be parsed: held to the rate of the other anonymous endpoint that does work.
    throttle_scope = "compatibility"

    @extend_schema(request={"multipart/form-data": JudgeIn}, responses={200: shape(Answer)})
    def post(self, request: Request) -> Response:
        given = JudgeIn(data=request.data)
        given.is_valid(raise_exception=True)
        data: JudgeFields = given.validated_data
        question = Question(draft=data["draft"].strip(), verifier=data["verifier"].strip(), k=data["k"],
                            temperature=data["temperature"], hardware=data["hardware"].strip())  # fmt: skip
        answer = judge_upload(upload=data["file"], question=question)
        if isinstance(answer, Refusal):
            error = {"code": answer.code, "message": answer.message, "details": {}}
            return Response({"error": error}, status=answer.status)
        return Response(answer)
