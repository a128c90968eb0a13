// analytic
