from .launcher import main

raise SystemExit(main())
