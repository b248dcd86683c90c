from sylvie.cli import main

raise SystemExit(main())
