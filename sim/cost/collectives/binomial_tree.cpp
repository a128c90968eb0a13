// binomial_tree
