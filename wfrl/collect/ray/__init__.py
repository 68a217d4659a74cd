"""The Ray collector, by subject: `collector` (the actors and the driver's side of a collection),
`local` (a private loopback-only instance and its clean-up), `address` (joining a cluster by
--ray-address), `common` (Ray's import and the one-line errors). Importing this package imports
neither ray nor torch."""
