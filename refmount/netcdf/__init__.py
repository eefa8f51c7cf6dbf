"""--netcdf only: one virtual netCDF-4 (HDF5) file of the whole reference set, laid out with
h5py (metadata kept in memory) and served as that metadata plus each chunk's referenced bytes."""
