// stages
