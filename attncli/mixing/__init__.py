"""Context mixing: its measures, in pure numpy (contributions), a sentence's documents of them
(documents), and their faithfulness over a corpus (faithfulness).
"""
