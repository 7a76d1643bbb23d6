"""``python -m wanrl_s3.cli``: the same as the ``wanrl-s3`` command."""

import sys

from .app import main

sys.exit(main())
