# validate: see README
