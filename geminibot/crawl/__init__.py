"""The polite crawler: frontier, politeness schedule and the trio crawl loop."""
