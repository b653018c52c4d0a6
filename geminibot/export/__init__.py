"""Open data: ``geminibot export`` writes what a crawl database holds as Parquet files (a
columnar index in Common Crawl's columns, hosts, policy files, redirects, the link graph
between capsules, the exclusions and their reasons, the feeds and their entries) with a
README saying what each holds."""
