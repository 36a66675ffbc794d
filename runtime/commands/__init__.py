"""Flask CLI command groups (`flask --app main GROUP ...`), one module per group."""
