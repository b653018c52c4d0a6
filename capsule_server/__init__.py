"""capsule_server: a minimal trio TLS Gemini server for test capsules, with a compliance log.

It imports geminibot.policy and geminibot.gemini; nothing in geminibot imports from it.
"""
