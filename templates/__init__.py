"""Jinja2 templates rendered by tl-provision (installed as provision.templates)."""
