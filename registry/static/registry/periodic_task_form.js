// The admin's periodic task form (templates/admin/djcelery/change_periodictask_form.html): say in words when the
// chosen crontab runs, as django-celery-beat's own inline script does; the Content-Security-Policy blocks that one.
(($) => {
  const readableCrontabs = JSON.parse(document.getElementById("readable-crontabs").textContent);
  const originalHelp = document.currentScript.dataset.help;

  $(".field-crontab_translation").hide();
  $(".field-crontab").on("change", () => {
    const translation = readableCrontabs[$("#id_crontab").val()];
    // Text nodes, not HTML: the help text and the translation are shown as they are.
    $(".field-crontab .help").text(originalHelp).append("<br>", document.createTextNode(`Translation: ${translation}`));
  });
})(django.jQuery);
