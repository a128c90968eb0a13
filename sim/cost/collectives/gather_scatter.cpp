// gather_scatter
