// solved
