"""`inspo view`: a local, read-only web viewer of runs and ablations (server-rendered pages, a little vendored
JavaScript, no CDN), and `--export DIR`, the same pages as static files. `Site` renders a page from its path;
`server.serve` puts it on loopback with uvicorn; `export.export_site` writes every page. docs/view.md shows it."""
