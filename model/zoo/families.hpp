// Entry lists of the zoo's families; zoo.cpp concatenates them.
#pragma once

#include <vector>

#include "model/zoo/zoo.hpp"

namespace trainsim {

// Classic image models: alexnet, vgg16/19, googlenet, inception-v3/v4, cifar100-cnn, fmnist-cnn.
std::vector<ZooEntry> classic_cnn_zoo_entries();

// Residual image models: fmnist-resnet20, resnet18/50/101/152 (ImageNet), resnet164/1001 (CIFAR), resnext29.
std::vector<ZooEntry> resnet_zoo_entries();

// MLPs and sequence models: mlps, snn, transformer, lstms, lm, nmt, text-bag.
std::vector<ZooEntry> sequence_zoo_entries();

// Language models the CPU executor trains on real text: fortunes-gpt, fortunes-lstm.
std::vector<ZooEntry> text_lm_zoo_entries();

}  // namespace trainsim
