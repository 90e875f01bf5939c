"""Development-time compiler: the bundle's Markdown -> references/index/*.json (markdown-it-py)."""
