# kolo.tensorflow (python/tensorflow/): KOLO_WITH_TENSORFLOW is AUTO (build it when a Python with
# TensorFlow is found, else say in one line what to install), ON (fail the configure step
# without it) or OFF. The Python is KOLO_TENSORFLOW_PYTHON, by default the venv
# tools/install-deps.sh --tensorflow makes (.venv/tensorflow in the source tree); in a pip build,
# the installing Python (cmake/KoloPip.cmake, which also fails the build when pip's isolation
# hides TensorFlow). Everything about TensorFlow is read from that interpreter's tf.sysconfig
# (its compile and link flags: include path, C++ standard, _GLIBCXX_USE_CXX11_ABI, the framework
# library), as TensorFlow's guide to custom ops says; nothing is hard-coded.
# Sets KOLO_HAVE_TENSORFLOW and, when ON, KOLO_TENSORFLOW_INCLUDE_DIR, KOLO_TENSORFLOW_DEFINES,
# KOLO_TENSORFLOW_LIBRARY, KOLO_TENSORFLOW_LIBRARY_DIR, KOLO_TENSORFLOW_VERSION,
# KOLO_TENSORFLOW_PYTHON_VERSION.
set(KOLO_WITH_TENSORFLOW AUTO CACHE STRING "Build kolo.tensorflow (python/tensorflow/): AUTO, ON or OFF")
set_property(CACHE KOLO_WITH_TENSORFLOW PROPERTY STRINGS AUTO ON OFF)
if(NOT KOLO_WITH_TENSORFLOW MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "KOLO_WITH_TENSORFLOW=${KOLO_WITH_TENSORFLOW}: use AUTO, ON or OFF")
endif()
set(KOLO_TENSORFLOW_PYTHON "${PROJECT_SOURCE_DIR}/.venv/tensorflow/bin/python"
    CACHE FILEPATH "Python interpreter whose TensorFlow kolo.tensorflow is built against")

set(KOLO_HAVE_TENSORFLOW OFF)
set(_kolo_tf_install_hint
    "run tools/install-deps.sh --tensorflow, or pass -DKOLO_TENSORFLOW_PYTHON=<a python with tensorflow>")
if(DEFINED SKBUILD)  # a pip build (cmake/KoloPip.cmake)
  string(CONCAT _kolo_tf_install_hint
         "pip install tensorflow-cpu into the environment you install kolo into and build with "
         "pip install --no-build-isolation, or leave it out with HOROVOD_WITHOUT_TENSORFLOW=1")
endif()

function(_kolo_tf_probe result)
  if(NOT EXISTS "${KOLO_TENSORFLOW_PYTHON}")
    set(${result} "no Python at KOLO_TENSORFLOW_PYTHON=${KOLO_TENSORFLOW_PYTHON}" PARENT_SCOPE)
    return()
  endif()
  # TF_CPP_MIN_LOG_LEVEL: importing TensorFlow logs about CPU features and plugins otherwise.
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env TF_CPP_MIN_LOG_LEVEL=3 "${KOLO_TENSORFLOW_PYTHON}" -c [=[
import sys, tensorflow as tf
print("|".join(tf.sysconfig.get_compile_flags()))
print("|".join(tf.sysconfig.get_link_flags()))
print(tf.__version__)
print("%d.%d" % sys.version_info[:2])
]=]
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT status EQUAL 0)
    set(${result} "${KOLO_TENSORFLOW_PYTHON} cannot import tensorflow" PARENT_SCOPE)
    return()
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  list(LENGTH lines count)
  if(NOT count EQUAL 4)
    set(${result} "unexpected answer from ${KOLO_TENSORFLOW_PYTHON}: ${out}" PARENT_SCOPE)
    return()
  endif()
  list(GET lines 0 compile_flags)
  list(GET lines 1 link_flags)
  list(GET lines 2 version)
  list(GET lines 3 pyversion)
  string(REPLACE "|" ";" compile_flags "${compile_flags}")
  string(REPLACE "|" ";" link_flags "${link_flags}")
  set(include_dir "")
  set(defines "")
  set(abi "")
  foreach(flag IN LISTS compile_flags)
    if(flag MATCHES "^-I(.+)$")
      set(include_dir "${CMAKE_MATCH_1}")
    elseif(flag MATCHES "^-D_GLIBCXX_USE_CXX11_ABI=([01])$")
      set(abi "${CMAKE_MATCH_1}")
      list(APPEND defines "_GLIBCXX_USE_CXX11_ABI=${abi}")
    elseif(flag MATCHES "^-D(.+)$")
      list(APPEND defines "${CMAKE_MATCH_1}")
    endif()  # --std=c++17: the target sets its standard itself
  endforeach()
  set(library_dir "")
  set(library "")
  foreach(flag IN LISTS link_flags)
    if(flag MATCHES "^-L(.+)$")
      set(library_dir "${CMAKE_MATCH_1}")
    elseif(flag MATCHES "^-l:(.+)$")
      set(library "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  if(include_dir STREQUAL "" OR library_dir STREQUAL "" OR library STREQUAL "")
    set(${result} "tf.sysconfig of ${KOLO_TENSORFLOW_PYTHON} gave no include path or library: "
                  "${compile_flags} ${link_flags}" PARENT_SCOPE)
    return()
  endif()
  # kolo's API passes std::string: the op library, libkolo and TensorFlow must agree on the ABI.
  if(NOT abi STREQUAL "1")
    set(${result} "TensorFlow ${version} was built without the C++11 ABI, which libkolo uses"
        PARENT_SCOPE)
    return()
  endif()
  set(KOLO_TENSORFLOW_INCLUDE_DIR "${include_dir}" PARENT_SCOPE)
  set(KOLO_TENSORFLOW_DEFINES "${defines}" PARENT_SCOPE)
  set(KOLO_TENSORFLOW_LIBRARY_DIR "${library_dir}" PARENT_SCOPE)
  set(KOLO_TENSORFLOW_LIBRARY "${library_dir}/${library}" PARENT_SCOPE)
  set(KOLO_TENSORFLOW_VERSION "${version}" PARENT_SCOPE)
  set(KOLO_TENSORFLOW_PYTHON_VERSION "${pyversion}" PARENT_SCOPE)
  set(${result} "" PARENT_SCOPE)
endfunction()

if(NOT KOLO_WITH_TENSORFLOW STREQUAL "OFF" AND NOT KOLO_SANITIZE STREQUAL "")
  # A sanitized libkolo.so needs the sanitizer runtime preloaded into Python: not supported.
  set(_kolo_tf_why "a KOLO_SANITIZE build cannot be loaded into an unsanitized Python")
  if(KOLO_WITH_TENSORFLOW STREQUAL "ON")
    message(FATAL_ERROR "KOLO_WITH_TENSORFLOW=ON: ${_kolo_tf_why}")
  endif()
  message(STATUS "kolo.tensorflow not built: ${_kolo_tf_why}")
elseif(NOT KOLO_WITH_TENSORFLOW STREQUAL "OFF")
  _kolo_tf_probe(_kolo_tf_problem)
  if(NOT _kolo_tf_problem STREQUAL "")
    kolo_pip_isolation_problem("${KOLO_TENSORFLOW_PYTHON}" tensorflow TENSORFLOW
                               _kolo_tf_isolation)
  endif()
  if(_kolo_tf_problem STREQUAL "")
    set(KOLO_HAVE_TENSORFLOW ON)
    message(STATUS "kolo.tensorflow: TensorFlow ${KOLO_TENSORFLOW_VERSION} from "
                   "${KOLO_TENSORFLOW_PYTHON}")
  elseif(_kolo_tf_isolation)  # AUTO too: the user has it, pip hid it
    message(FATAL_ERROR "kolo.tensorflow: ${_kolo_tf_problem}: ${_kolo_tf_isolation}")
  elseif(KOLO_WITH_TENSORFLOW STREQUAL "ON")
    message(FATAL_ERROR "KOLO_WITH_TENSORFLOW=ON: ${_kolo_tf_problem}; ${_kolo_tf_install_hint}")
  else()
    message(STATUS "kolo.tensorflow not built (${_kolo_tf_problem}): ${_kolo_tf_install_hint}")
  endif()
endif()
