"""Widgets of the Roder app."""
