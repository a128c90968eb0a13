// recursive_doubling
