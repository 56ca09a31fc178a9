"""One module per `edgekit` subcommand; each exposes register(subparsers)."""
