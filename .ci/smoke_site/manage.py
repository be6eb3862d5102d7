#!/usr/bin/env python
"""manage.py of the package smoke test's project (.ci/package_smoke.py copies it out)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "smoke_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
