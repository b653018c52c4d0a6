import sys

from geminibot.cli import main

sys.exit(main())
