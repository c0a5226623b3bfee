"""Reading the asv results: a tidy table (``reports.results``) and the terminal summary (``reports.summary``)."""
