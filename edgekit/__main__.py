import sys

from edgekit._entry import main

sys.exit(main())
