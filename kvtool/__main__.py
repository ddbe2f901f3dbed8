"""``python -m kvtool`` runs the same CLI as the ``kvtool`` script."""

from kvtool.cli.app import main

if __name__ == "__main__":
    main()
