# sim: see README
