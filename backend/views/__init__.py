"""View models (pure pandas) and Plotly chart factories shared by the pages, the report and the CLI."""
