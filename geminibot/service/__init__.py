"""The whole search engine as one supervised service (``geminibot serve``)."""
