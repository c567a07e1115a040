"""Modal screens of the app: approval, help, resume picker, first run."""
