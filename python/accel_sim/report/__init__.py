"""Rendering of results: terminal tables, JSON objects, hint sentences. No arithmetic on costs."""
