# The GPU backends: KOLO_WITH_CUDA and KOLO_WITH_NCCL are AUTO (build what is found), ON (fail
# the configure step without it) or OFF. Sets KOLO_HAVE_CUDA / KOLO_HAVE_NCCL and, when found,
# the imported target kolo::nccl. Only ops/cuda (and ops/nccl) compile against these headers.
set(KOLO_WITH_CUDA AUTO CACHE STRING "Build the CUDA device backend: AUTO, ON or OFF")
set(KOLO_WITH_NCCL AUTO CACHE STRING "Build the NCCL collective backend: AUTO, ON or OFF")
set_property(CACHE KOLO_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
set_property(CACHE KOLO_WITH_NCCL PROPERTY STRINGS AUTO ON OFF)
foreach(var KOLO_WITH_CUDA KOLO_WITH_NCCL)
  if(NOT ${var} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${var}=${${var}}: use AUTO, ON or OFF")
  endif()
endforeach()

set(KOLO_HAVE_CUDA OFF)
set(KOLO_HAVE_NCCL OFF)
if(NOT KOLO_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(KOLO_HAVE_CUDA ON)
  elseif(KOLO_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "KOLO_WITH_CUDA=ON but no CUDA toolkit was found (CUDAToolkit_ROOT)")
  endif()
endif()
if(KOLO_WITH_NCCL STREQUAL "ON" AND NOT KOLO_HAVE_CUDA)
  message(FATAL_ERROR "KOLO_WITH_NCCL=ON needs CUDA (KOLO_WITH_CUDA is ${KOLO_WITH_CUDA})")
endif()
if(KOLO_HAVE_CUDA AND NOT KOLO_WITH_NCCL STREQUAL "OFF")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}
               ${CUDAToolkit_LIBRARY_ROOT} PATH_SUFFIXES lib lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(KOLO_HAVE_NCCL ON)
    add_library(kolo::nccl UNKNOWN IMPORTED)
    set_target_properties(kolo::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  elseif(KOLO_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "KOLO_WITH_NCCL=ON but nccl.h / libnccl were not found (NCCL_ROOT)")
  endif()
endif()

if(KOLO_HAVE_CUDA)
  message(STATUS "kolo GPU path: CUDA ${CUDAToolkit_VERSION} device backend built"
)
else()
  message(STATUS "kolo GPU path: built without CUDA (KOLO_WITH_CUDA=${KOLO_WITH_CUDA}); GPU "
                 "tensors are refused at enqueue")
endif()
if(KOLO_HAVE_NCCL)
  message(STATUS "kolo GPU path: NCCL found (${NCCL_LIBRARY})")
endif()
