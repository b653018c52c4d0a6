"""Feeds: gemsub pages, Atom, RSS and twtxt documents found while crawling."""
