print("hcpack")
