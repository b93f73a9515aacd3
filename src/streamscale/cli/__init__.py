"""The ``streamscale`` command."""
