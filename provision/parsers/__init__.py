"""Pure parsers and merges (text in, frozen data out; no I/O): host facts and settings.json."""
