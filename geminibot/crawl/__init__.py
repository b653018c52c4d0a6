"""The polite crawler: store, scheduler, protocol adapters, policy files and the trio loop."""
