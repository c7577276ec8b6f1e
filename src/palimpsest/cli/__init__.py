"""The ``pal`` command. Library code never imports this package."""
