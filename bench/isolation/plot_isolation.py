import sys; print("plot stub")
