// algorithms
