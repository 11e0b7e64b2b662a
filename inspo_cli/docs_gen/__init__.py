"""Every generated documentation page, written from the code by one command.

    python -m inspo_cli.docs_gen            # writes every page below docs/
    python -m inspo_cli.docs_gen --check    # exit 1, naming each page that is stale, and the command that fixes it

One module per page (`pages.PAGES` lists them): the recipe reference, the command line, the API seams, the
strategies guide, the faithfulness table, the project layout and the logged metrics. This package is the top
layer of the import contracts (above `inspo_cli.cli`), so a generator imports what it documents, the CLI app
included, and nothing imports it.
"""
