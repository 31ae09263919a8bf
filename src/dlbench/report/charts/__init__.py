"""Charts: one model of a bar chart and of a curve chart (model), drawn as PNG
with matplotlib (png) and as inline SVG for the HTML report (svg)."""
