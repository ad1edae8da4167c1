# The pip build (pyproject.toml: scikit-build-core runs this CMake project, README "Install into
# your venv with pip"). Included before KoloTorch.cmake and KoloTensorFlow.cmake. In a pip build
# (SKBUILD is set):
#   - torch and TensorFlow are read from the Python doing the install (scikit-build-core passes
#     it as Python_EXECUTABLE) unless KOLO_TORCH_PYTHON / KOLO_TENSORFLOW_PYTHON are given;
#   - Horovod's HOROVOD_WITH[OUT]_PYTORCH / HOROVOD_WITH[OUT]_TENSORFLOW, and the same names
#     with KOLO_ in place of HOROVOD_, choose KOLO_WITH_TORCH / KOLO_WITH_TENSORFLOW: "1"
#     requires the framework (ON), "1" in a WITHOUT variable leaves it out (OFF); unset, the
#     option's own value holds (AUTO unless -C cmake.define.KOLO_WITH_TORCH=... says otherwise).
# In every build: kolo_pip_isolation_problem(), which tells pip's build isolation from a Python
# that really lacks the framework, and kolo_install_python_files(), which installs package
# files both where `cmake --install` puts them and into the wheel (cmake/KoloWheel.cmake).

set(KOLO_WHEEL_COMPONENT kolo_wheel)  # the install component pyproject.toml installs

if(DEFINED SKBUILD)
  if(NOT Python_EXECUTABLE)
    message(FATAL_ERROR "a pip build (SKBUILD) without Python_EXECUTABLE: scikit-build-core "
                        "passes it; is its cmake.python-hints setting off?")
  endif()
  # Defined here, these win over the defaults the two files below give (the .venv of the source
  # tree). A value the last pip configure defaulted follows a new installing Python (a reused
  # build directory: -C build-dir=...); one given with -C cmake.define... stays.
  foreach(var KOLO_TORCH_PYTHON KOLO_TENSORFLOW_PYTHON)
    if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "${_KOLO_PIP_PYTHON}")
      set(${var} "${Python_EXECUTABLE}" CACHE FILEPATH
          "Python interpreter whose torch or TensorFlow kolo is built against" FORCE)
    endif()
  endforeach()
  set(_KOLO_PIP_PYTHON "${Python_EXECUTABLE}" CACHE INTERNAL "the Python of the last pip build")

  # _kolo_pip_choice(<option> <framework word>): sets the normal variable <option> (it shadows
  # the cache entry for this configure only, so nothing sticks to a reused build directory) from
  # the four environment variables of that framework.
  function(_kolo_pip_choice option word)
    set(with "")
    set(without "")
    foreach(prefix HOROVOD KOLO)
      foreach(kind WITH WITHOUT)
        set(name ${prefix}_${kind}_${word})
        set(value "$ENV{${name}}")
        if(NOT value MATCHES "^(|0|1)$")
          message(FATAL_ERROR "${name}=${value}: use 1 (or 0, or leave it unset)")
        endif()
        if(value STREQUAL "1")
          string(TOLOWER ${kind} kind_lower)
          list(APPEND ${kind_lower} ${name})
        endif()
      endforeach()
    endforeach()
    if(with AND without)
      message(FATAL_ERROR "${with} and ${without} are both 1: set one of them")
    elseif(with)
      set(${option} ON PARENT_SCOPE)
      message(STATUS "${option}=ON from ${with}")
    elseif(without)
      set(${option} OFF PARENT_SCOPE)
      message(STATUS "${option}=OFF from ${without}")
    endif()
  endfunction()
  _kolo_pip_choice(KOLO_WITH_TORCH PYTORCH)
  _kolo_pip_choice(KOLO_WITH_TENSORFLOW TENSORFLOW)
endif()

# kolo_pip_isolation_problem(<python> <module> <PYTORCH|TENSORFLOW> <result>): in a pip build
# whose <python> cannot import <module>, sets <result> to the reason when pip's build isolation
# is what hides it (pip runs the build with PYTHONPATH naming its own environment and a
# sitecustomize that drops the venv's site-packages, so the same interpreter without that
# PYTHONPATH finds the venv's torch); else to "".
function(kolo_pip_isolation_problem python module word result)
  set(${result} "" PARENT_SCOPE)
  if(NOT DEFINED SKBUILD OR "$ENV{PYTHONPATH}" STREQUAL "")
    return()
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH --unset=PYTHONNOUSERSITE
            TF_CPP_MIN_LOG_LEVEL=3 "${python}" -c "import ${module}"
    RESULT_VARIABLE status OUTPUT_QUIET ERROR_QUIET)
  if(status EQUAL 0)
    string(CONCAT problem
           "pip's build isolation hides the ${module} of ${python}'s environment; build against "
           "it with: pip install scikit-build-core && pip install --no-build-isolation <this "
           "folder or sdist> (or leave it out: HOROVOD_WITHOUT_${word}=1)")
    set(${result} "${problem}" PARENT_SCOPE)
  endif()
endfunction()

# kolo_install_python_files(<source folder> <file>...): the files (paths relative to the source
# folder, e.g. kolo/torch/optimizer.py) go under KOLO_PYTHON_INSTALL_DIR for `cmake --install`,
# and under the wheel's root for the pip build (component kolo_wheel, which a plain
# `cmake --install` leaves out).
function(kolo_install_python_files source_dir)
  foreach(file IN LISTS ARGN)
    get_filename_component(dir ${file} DIRECTORY)
    install(FILES ${source_dir}/${file} DESTINATION ${KOLO_PYTHON_INSTALL_DIR}/${dir})
    install(FILES ${source_dir}/${file} DESTINATION ${dir}
            COMPONENT ${KOLO_WHEEL_COMPONENT} EXCLUDE_FROM_ALL)
  endforeach()
endfunction()
