#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "silvia.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    from silvia.startup import StartupError

    try:
        execute_from_command_line(sys.argv)
    except (ImproperlyConfigured, StartupError) as error:
        # A setting or a server that is not there: one line says which (docs/deploying.md#start-up-errors).
        if "--traceback" in sys.argv:
            raise
        sys.exit(f"{type(error).__name__}: {error}")


if __name__ == "__main__":
    main()
