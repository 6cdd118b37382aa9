"""Documents drawn for people: a module per family of commands (rich), the compact heatmap,
the SVG, HTML and PNG pictures, and every JSON writer. A view knows no files and computes
nothing of the attention: it draws the documents analyze.py makes, as they are."""
