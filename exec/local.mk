# exec: see README
