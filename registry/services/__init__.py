"""Services: every write to the catalog goes through a function here."""
