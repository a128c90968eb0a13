// rabenseifner
