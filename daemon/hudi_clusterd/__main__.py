"""``python -m hudi_clusterd`` runs the command-line interface."""

from hudi_clusterd.cli import main

raise SystemExit(main())
